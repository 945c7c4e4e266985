#include "common/points.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace ex {

Points read_points(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw tg::IOError(path + " is a directory, expected a CSV file of points");
  std::ifstream in(path);
  if (!in) throw tg::IOError("cannot open " + path + ": " + std::strerror(errno));
  std::vector<float> xs;
  std::vector<int64_t> ys;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // files written on Windows
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream fields(line);
    float a, b;
    int64_t label;
    std::string rest;
    if (!(fields >> a >> b >> label) || (fields >> rest)) {
      if (line_no == 1) continue;  // a header
      throw tg::ValueError(where + ": expected 'x,y,label' (two numbers and a 0/1 label)");
    }
    if (!std::isfinite(a) || !std::isfinite(b))
      throw tg::ValueError(where + ": coordinates must be finite");
    if (label != 0 && label != 1)
      throw tg::ValueError(where + ": label " + std::to_string(label) + ", expected 0 or 1");
    xs.push_back(a);
    xs.push_back(b);
    ys.push_back(label);
  }
  if (in.bad()) throw tg::IOError("error reading " + path + ": " + std::strerror(errno));
  if (ys.size() < 4)
    throw tg::ValueError(path + ": expected at least 4 points, got " + std::to_string(ys.size()));
  const auto n = static_cast<int64_t>(ys.size());
  return {tg::tensor(xs, {n, 2}), tg::Indices(ys, {n})};
}

}  // namespace ex
