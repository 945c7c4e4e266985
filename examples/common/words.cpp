#include "common/words.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "tapegrad/error.h"

namespace ex {

std::u32string utf8_decode(const std::string& text, const std::string& where) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  auto bad = [&](const char* what) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[i]));
    throw tg::ValueError(where + ": invalid UTF-8 (" + what + ") at byte " + std::to_string(i) +
                         " (" + hex + ")");
  };
  while (i < text.size()) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    int extra = 0;
    char32_t c = 0;
    if (b0 < 0x80) { c = b0; extra = 0; }
    else if ((b0 & 0xE0) == 0xC0) { c = b0 & 0x1F; extra = 1; }
    else if ((b0 & 0xF0) == 0xE0) { c = b0 & 0x0F; extra = 2; }
    else if ((b0 & 0xF8) == 0xF0) { c = b0 & 0x07; extra = 3; }
    else bad("bad lead byte");
    if (i + static_cast<size_t>(extra) >= text.size()) bad("truncated sequence");
    for (int k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) bad("bad continuation byte");
      c = (c << 6) | (b & 0x3F);
    }
    static const char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (c < kMin[extra]) bad("overlong form");
    if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) bad("not a Unicode scalar value");
    out.push_back(c);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

std::string utf8_encode(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

std::string utf8_encode(const std::u32string& text) {
  std::string s;
  for (char32_t c : text) s += utf8_encode(c);
  return s;
}

std::u32string to_lower(std::u32string text) {
  for (char32_t& c : text) {
    if (c >= U'A' && c <= U'Z') c += 32;
    else if (c >= 0xC0 && c <= 0xDE && c != 0xD7) c += 32;           // À..Þ except ×
    else if (c >= 0x100 && c <= 0x137 && c % 2 == 0) c += 1;          // Ā..ķ pairs
    else if (c >= 0x139 && c <= 0x148 && c % 2 == 1) c += 1;          // Ĺ..ň (Ł, Ń)
    else if (c >= 0x14A && c <= 0x177 && c % 2 == 0) c += 1;          // Ŋ..ŷ (Ś, Š, Ź ...)
    else if (c == 0x178) c = 0xFF;                                    // Ÿ
    else if (c >= 0x179 && c <= 0x17E && c % 2 == 1) c += 1;          // Ź, Ż, Ž
  }
  return text;
}

namespace {

std::ifstream open_or_throw(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw tg::IOError("cannot open " + path + ": " + std::strerror(errno));
  return in;
}

/// One line without its end: a CRLF file's '\r' is part of the line end, not of the word.
bool read_line(std::istream& in, std::string& line) {
  if (!std::getline(in, line)) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

LabeledWords read_split(const std::string& path, const std::vector<std::string>& languages,
                        int64_t limit) {
  std::ifstream in = open_or_throw(path);
  LabeledWords split;
  std::string line;
  int64_t line_no = 0;
  while (read_line(in, line)) {
    ++line_no;
    if (limit > 0 && split.size() >= limit) break;
    const std::string where = path + ":" + std::to_string(line_no);
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0 || tab + 1 == line.size())
      throw tg::ValueError(where + ": expected 'lang<TAB>word', got '" + line + "'");
    const std::string lang = line.substr(0, tab);
    const auto it = std::find(languages.begin(), languages.end(), lang);
    if (it == languages.end())
      throw tg::ValueError(where + ": language '" + lang + "' is not in languages.txt");
    std::u32string word = utf8_decode(line.substr(tab + 1), where);
    if (word.size() > kMaxWordLength)  // a 1 MB "word" took 36 s and 5.4 GB before this
      throw tg::ValueError(where + ": a word of " + std::to_string(word.size()) +
                           " characters; words may have at most " + std::to_string(kMaxWordLength));
    split.words.push_back(std::move(word));
    split.labels.push_back(it - languages.begin());
  }
  if (in.bad()) throw tg::IOError("cannot read " + path + ": " + std::strerror(errno));
  if (split.size() == 0) throw tg::ValueError(path + ": no rows");
  return split;
}

}  // namespace

WordsData load_words(const std::string& dir, int64_t limit) {
  WordsData d;
  {
    const std::string path = join(dir, "languages.txt");
    std::ifstream in = open_or_throw(path);
    std::string line;
    while (read_line(in, line)) {
      if (line.empty()) continue;
      if (std::find(d.languages.begin(), d.languages.end(), line) != d.languages.end())
        throw tg::ValueError(path + ": language '" + line + "' is listed twice");
      d.languages.push_back(line);
    }
    if (d.languages.size() < 2)
      throw tg::ValueError(path + ": expected at least 2 languages, got " +
                           std::to_string(d.languages.size()));
  }
  d.train = read_split(join(dir, "train.tsv"), d.languages, limit);
  d.val = read_split(join(dir, "val.tsv"), d.languages, limit);
  d.test = read_split(join(dir, "test.tsv"), d.languages, limit);
  return d;
}

CharVocab::CharVocab(const std::vector<std::u32string>& words) {
  for (const auto& w : words) chars_ += w;
  std::sort(chars_.begin(), chars_.end());
  chars_.erase(std::unique(chars_.begin(), chars_.end()), chars_.end());
}

CharVocab CharVocab::from_utf8(const std::string& chars) {
  CharVocab v;
  v.chars_ = utf8_decode(chars, "vocabulary");
  if (!std::is_sorted(v.chars_.begin(), v.chars_.end()) ||
      std::adjacent_find(v.chars_.begin(), v.chars_.end()) != v.chars_.end())
    throw tg::ValueError("vocabulary '" + chars + "' is not a sorted list of distinct characters");
  return v;
}

int64_t CharVocab::find(char32_t c) const {
  const auto it = std::lower_bound(chars_.begin(), chars_.end(), c);
  return it != chars_.end() && *it == c ? it - chars_.begin() : -1;
}

std::vector<int64_t> CharVocab::encode(const std::u32string& word) const {
  std::vector<int64_t> ids;
  ids.reserve(word.size());
  for (char32_t c : word) {
    const int64_t id = find(c);
    if (id < 0) {
      char code[16];
      std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c));
      throw tg::ValueError("character '" + utf8_encode(c) + "' (" + code + ") in '" +
                           utf8_encode(word) + "' is not in the vocabulary (" + chars_utf8() + ")");
    }
    ids.push_back(id);
  }
  return ids;
}

}  // namespace ex
