// The shared example code: UTF-8 decoding, lowercasing, the character vocabulary, the words
// dataset loader and the CSV log.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/cli.h"
#include "common/run_log.h"
#include "common/words.h"
#include "tapegrad/error.h"

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tg_examples_common_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST(Utf8, DecodesOneToFourByteSequences) {
  const std::u32string s = ex::utf8_decode("aß\xc5\xbc\xe2\x82\xac\xf0\x9f\x98\x80");  // a ß ż € 😀
  EXPECT_EQ(s, (std::u32string{U'a', 0xDF, 0x17C, 0x20AC, 0x1F600}));
  EXPECT_EQ(ex::utf8_encode(s), "aß\xc5\xbc\xe2\x82\xac\xf0\x9f\x98\x80");
}

TEST(Utf8, RejectsMalformedInputNamingWhere) {
  for (const std::string bad : {std::string("\xc0\x80"),       // overlong NUL
                                std::string("\xed\xa0\x80"),   // a surrogate
                                std::string("ab\xc3"),         // truncated
                                std::string("\xe2\x28\xa1"),   // bad continuation
                                std::string("\xff"),           // not a lead byte
                                std::string("\xf4\x90\x80\x80")}) {  // past U+10FFFF
    try {
      ex::utf8_decode(bad, "file.tsv:7");
      FAIL() << "accepted malformed input";
    } catch (const tg::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("file.tsv:7: invalid UTF-8"), std::string::npos) << e.what();
    }
  }
}

TEST(Utf8, LowercasesTheLettersOfTheElevenLanguages) {
  EXPECT_EQ(ex::to_lower(ex::utf8_decode("ŁÓDŹ KØBENHAVN ÀÉÎÕÜ ĄĆĘŃŚŻ Straße")),
            ex::utf8_decode("łódź københavn àéîõü ąćęńśż straße"));
}

TEST(CharVocab, SortedDistinctCharactersAndClearErrors) {
  const ex::CharVocab v({U"bca", U"ab", ex::utf8_decode("ża")});
  EXPECT_EQ(v.size(), 4);
  EXPECT_EQ(v.encode(ex::utf8_decode("abcż")), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(v.find(U'z'), -1);
  EXPECT_EQ(ex::CharVocab::from_utf8(v.chars_utf8()).encode(U"cab"), v.encode(U"cab"));
  try {
    v.encode(U"abz");
    FAIL();
  } catch (const tg::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("character 'z' (U+007A) in 'abz' is not in the vocabulary"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(ex::CharVocab::from_utf8("ba"), tg::ValueError);  // not sorted
}

TEST(Words, LoadsTheShippedDataset) {
  const ex::WordsData d = ex::load_words(ex::words_dir());
  ASSERT_EQ(d.languages.size(), 11u);
  EXPECT_EQ(d.languages[0], "en");
  EXPECT_EQ(d.train.size(), 17600);
  EXPECT_EQ(d.val.size(), 2200);
  EXPECT_EQ(d.test.size(), 2200);
  EXPECT_EQ(ex::CharVocab(d.train.words).size(), 60);  // datasets/README.md
  const ex::WordsData small = ex::load_words(ex::words_dir(), 5);
  EXPECT_EQ(small.train.size(), 5);
  EXPECT_EQ(small.train.words[0], d.train.words[0]);
  EXPECT_EQ(small.train.labels[2], d.train.labels[2]);
}

TEST(Words, MissingFilesAndBadRowsGiveMessages) {
  const std::string dir = temp_dir("words");
  try {
    ex::load_words(dir);
    FAIL();
  } catch (const tg::IOError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open " + dir + "/languages.txt"), std::string::npos);
  }
  write(dir + "/languages.txt", "en\nde\n");
  write(dir + "/train.tsv", "en\thouse\nde\thaus\n");
  write(dir + "/val.tsv", "en\thome\n");
  try {
    ex::load_words(dir);
    FAIL();
  } catch (const tg::IOError& e) {
    EXPECT_NE(std::string(e.what()).find("test.tsv"), std::string::npos) << e.what();
  }
  write(dir + "/test.tsv", "en\tyard\nfr\tmaison\n");
  try {
    ex::load_words(dir);
    FAIL();
  } catch (const tg::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("test.tsv:2: language 'fr' is not in languages.txt"),
              std::string::npos) << e.what();
  }
  write(dir + "/test.tsv", "en yard\n");
  EXPECT_THROW(ex::load_words(dir), tg::ValueError);
  write(dir + "/test.tsv", "de\tgarten\n");
  const ex::WordsData d = ex::load_words(dir);
  EXPECT_EQ(d.train.labels, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(d.test.words[0], U"garten");
}

TEST(CsvLog, WritesRowsAndKeepsThemUpToTheResumeStep) {
  const std::string path = temp_dir("csv") + "/sub/run.csv";
  {
    ex::CsvLog log(path);  // creates sub/
    log.add(10, 2.5, 0.1, 0.25);
    log.add(20, 2.0, 0.1, std::nan(""));
    log.add(30, 1.5, 0.05, 0.5);
  }
  EXPECT_EQ(read(path), "step,loss,lr,accuracy\n10,2.5,0.1,0.25\n20,2,0.1,\n30,1.5,0.05,0.5\n");
  {
    ex::CsvLog log(path, 20);
    log.add(25, 1.75, 0.1, 0.4);
  }
  EXPECT_EQ(read(path), "step,loss,lr,accuracy\n10,2.5,0.1,0.25\n20,2,0.1,\n25,1.75,0.1,0.4\n");
  EXPECT_EQ(ex::sibling_path("checkpoints/run.ckpt", ".png"), "checkpoints/run.png");
}
