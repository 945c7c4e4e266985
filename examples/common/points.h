#pragma once
// Labelled 2-D points for linear_basics: its generated problems and the CSV behind --data.
//
//   ex::Points p = ex::read_points("rings.csv");   // "x,y,label" per line, label 0 or 1
//   p.x;  // (N, 2) floats
//   p.y;  // (N) labels
#include <string>

#include "tapegrad/tapegrad.h"

namespace ex {

struct Points {
  tg::Tensor x;   // (N, 2)
  tg::Indices y;  // (N)
};

/// Reads "x,y,label" lines (commas or blanks between fields; label 0 or 1; an optional header
/// as the first line; blank lines skipped). Every field must be a finite number and nothing
/// may follow the label. tg::IOError when the file cannot be opened, tg::ValueError
/// (path:line) for a malformed line, and when fewer than 4 points remain.
Points read_points(const std::string& path);

}  // namespace ex
