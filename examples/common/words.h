#pragma once
// The shipped words-by-language dataset (datasets/words, see datasets/README.md): UTF-8
// decoding, a character vocabulary, and the three splits.
//
//   ex::WordsData d = ex::load_words(dir);      // languages.txt, train/val/test.tsv
//   ex::CharVocab vocab(d.train.words);         // the 60 characters, in code-point order
//   std::vector<int64_t> ids = vocab.encode(d.train.words[0]);
#include <cstdint>
#include <string>
#include <vector>

namespace ex {

/// Decodes UTF-8 into code points; tg::ValueError naming `where` on a malformed sequence
/// (overlong forms, surrogates and values past U+10FFFF included).
std::u32string utf8_decode(const std::string& text, const std::string& where = "input");
std::string utf8_encode(const std::u32string& text);
std::string utf8_encode(char32_t c);
/// Lowercases ASCII, Latin-1 and Latin Extended-A letters (enough for the 11 languages).
std::u32string to_lower(std::u32string text);

/// Words and their integer labels (indices into WordsData::languages).
struct LabeledWords {
  std::vector<std::u32string> words;
  std::vector<int64_t> labels;
  int64_t size() const { return static_cast<int64_t>(words.size()); }
};

/// The longest word a words file may hold (the shipped lists' longest has 18 characters).
constexpr size_t kMaxWordLength = 64;

struct WordsData {
  std::vector<std::string> languages;  // "en", "de", ... in languages.txt order
  LabeledWords train, val, test;
};

/// Reads `dir`/languages.txt and `dir`/{train,val,test}.tsv. With limit > 0 each split keeps
/// at most its first `limit` rows. tg::IOError for a missing or unreadable file,
/// tg::ValueError (file:line) for a malformed row or an unknown language.
WordsData load_words(const std::string& dir, int64_t limit = 0);

/// Characters <-> ids 0..size()-1, in code-point order.
class CharVocab {
 public:
  CharVocab() = default;
  /// Every distinct character of `words`.
  explicit CharVocab(const std::vector<std::u32string>& words);
  /// From the characters themselves, in id order (as saved by chars_utf8()).
  static CharVocab from_utf8(const std::string& chars);

  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  /// The id of `c`, or -1.
  int64_t find(char32_t c) const;
  /// Every character's id; tg::ValueError naming the character and the word if one is not
  /// in the vocabulary.
  std::vector<int64_t> encode(const std::u32string& word) const;
  char32_t at(int64_t id) const { return chars_.at(static_cast<size_t>(id)); }
  /// The characters in id order, as UTF-8 (for checkpoint metadata).
  std::string chars_utf8() const { return utf8_encode(chars_); }

 private:
  std::u32string chars_;  // sorted, distinct
};

}  // namespace ex
