// The shared example code: UTF-8 decoding, lowercasing, the character vocabulary, the words
// dataset loader, the CSV log and the training-run helpers.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/cli.h"
#include "common/points.h"
#include "common/run_log.h"
#include "common/training.h"
#include "common/words.h"
#include "tapegrad/tapegrad.h"

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

// Regressions: a CRLF file's '\r' used to become a vocabulary character, and a language
// listed twice made two classes of it.
TEST(Words, CrLfLinesAndDuplicateLanguages) {
  const std::string dir = temp_dir("words_crlf");
  write(dir + "/languages.txt", "en\r\nde\r\n");
  write(dir + "/train.tsv", "en\thouse\r\nde\thaus\r\n");
  write(dir + "/val.tsv", "en\thome\r\n");
  write(dir + "/test.tsv", "de\tgarten\r\n");
  const ex::WordsData d = ex::load_words(dir);
  EXPECT_EQ(d.languages, (std::vector<std::string>{"en", "de"}));
  EXPECT_EQ(d.train.words[0], U"house");
  EXPECT_EQ(d.test.words[0], U"garten");
  write(dir + "/test.tsv", "de\t" + std::string(100000, 'a') + "\n");  // was 36 s and 5.4 GB
  try {
    ex::load_words(dir);
    FAIL();
  } catch (const tg::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("test.tsv:1: a word of 100000 characters"), std::string::npos) << e.what();
  }
  write(dir + "/test.tsv", "de\tgarten\r\n");
  write(dir + "/languages.txt", "en\nde\nen\n");
  try {
    ex::load_words(dir);
    FAIL();
  } catch (const tg::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("language 'en' is listed twice"), std::string::npos) << e.what();
  }
}

TEST(Points, ReadsAHeaderCommasBlanksAndCrLf) {
  const std::string path = temp_dir("points") + "/p.csv";
  write(path, "x,y,label\r\n0.5,-1,1\r\n\n  \n-2 3.25 0\n1e-3,4,1\n7,8,0");
  const ex::Points p = ex::read_points(path);
  EXPECT_EQ(p.x.shape(), (tg::Shape{4, 2}));
  EXPECT_EQ(p.x.to_vector(), (std::vector<float>{0.5f, -1, -2, 3.25f, 1e-3f, 4, 7, 8}));
  EXPECT_EQ(p.y.values, (std::vector<int64_t>{1, 0, 1, 0}));
}

TEST(Points, BadLinesNameTheFileAndLine) {
  const std::string path = temp_dir("points_bad") + "/p.csv";
  const std::string four = "0,0,0\n0,1,1\n1,0,1\n1,1,0\n";
  const std::pair<std::string, std::string> cases[] = {
      {four + "1,2\n", "p.csv:5: expected 'x,y,label'"},
      {four + "1,2,1,9\n", "p.csv:5: expected 'x,y,label'"},  // a fourth field
      {four + "1,2,one\n", "p.csv:5: expected 'x,y,label'"},
      {four + "1e99,2,1\n", "p.csv:5: expected 'x,y,label'"},  // past float's range
      {four + "1,2,2\n", "p.csv:5: label 2, expected 0 or 1"},
      {four + "1,2,-1\n", "p.csv:5: label -1, expected 0 or 1"},
      {"header\n0,0,0\n1,1,1\n", "expected at least 4 points, got 2"},
      {"", "expected at least 4 points, got 0"},
      {"x,y,label\nx,y,label\n", "p.csv:2: expected 'x,y,label'"},  // one header only
  };
  for (const auto& [text, message] : cases) {
    write(path, text);
    try {
      ex::read_points(path);
      ADD_FAILURE() << "no error for: " << text;
    } catch (const tg::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(ex::read_points(path + ".missing"), tg::IOError);
  try {
    ex::read_points(temp_dir("points_dir"));
    ADD_FAILURE() << "no error for a directory";
  } catch (const tg::IOError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
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

TEST(LossLog, WindowsAndEvaluationSumsSurviveTheStateDict) {
  ex::LossLog log;
  log.add(1.0);
  log.add(2.0);
  log.lr = 0.25;
  EXPECT_DOUBLE_EQ(log.take_window(), 1.5);
  log.add(4.0);
  EXPECT_DOUBLE_EQ(log.since_eval(), 7.0 / 3);
  ex::LossLog copy;
  copy.load_state_dict(log.state_dict());
  EXPECT_EQ(copy.window_n, 1);
  EXPECT_EQ(copy.eval_n, 3);
  EXPECT_DOUBLE_EQ(copy.lr, 0.25);
  EXPECT_DOUBLE_EQ(copy.take_window(), 4.0);
  copy.end_eval_window();
  copy.add(3.0);
  EXPECT_DOUBLE_EQ(copy.since_eval(), 3.0);
  EXPECT_THROW(copy.load_state_dict(tg::StateDict()), tg::Error);
}

TEST(Training, SameScheduleCheckAndMetadataSayWhatDiffers) {
  auto model = std::make_shared<tg::nn::Linear>(2, 1);
  tg::optim::SGD opt(model->parameters(), tg::optim::SGDOptions(0.5));
  tg::optim::StepLR sched(opt, 10);
  tg::Checkpoint ck = ex::snapshot(*model, {{"scheduler", sched}}, 7);
  EXPECT_EQ(ck.step, 7);
  EXPECT_TRUE(ck.has("scheduler"));
  EXPECT_FALSE(ck.model.empty());
  ck.states["scheduler"].numbers["total_steps"] = 100;  // StepLR has no total; as WarmupCosineLR
  ex::check_same_schedule(ck, "run.ckpt", 100, 0.5);
  try {
    ex::check_same_schedule(ck, "run.ckpt", 200, 0.5);
    FAIL() << "accepted another --steps";
  } catch (const tg::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("run.ckpt was started with --steps 100 --lr 0.5, this run has --steps 200"),
              std::string::npos) << e.what();
  }

  const std::map<std::string, std::string> meta = {{"example", "demo"}, {"width", "8"}};
  EXPECT_EQ(ex::ExampleMetadata(meta, "a.ckpt", "demo").at("width"), "8");
  try {
    ex::ExampleMetadata(meta, "a.ckpt", "demo").at("depth");
    FAIL() << "found a missing key";
  } catch (const tg::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("a.ckpt: metadata has no 'depth' (not a demo checkpoint?)"),
              std::string::npos) << e.what();
  }
  try {
    ex::ExampleMetadata(meta, "a.ckpt", "other");
    FAIL() << "accepted another example's checkpoint";
  } catch (const tg::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("a.ckpt is a demo checkpoint, not a other one"), std::string::npos)
        << e.what();
  }
}

namespace {

/// A StepLoop on a Linear(2, 1) fitting y = 1 with SGD and StepLR(1, 0.5); records the steps
/// it saved and evaluated at, and each step's loss.
struct LoopRun {
  std::shared_ptr<tg::nn::Linear> model;
  tg::optim::SGD opt;
  tg::optim::StepLR sched;
  ex::LossLog log;
  std::vector<double> losses;
  std::vector<int64_t> saved, evaluated;
  std::vector<double> train_losses;
  tg::Checkpoint last;

  LoopRun()
      : model(std::make_shared<tg::nn::Linear>(2, 1)),
        opt(model->parameters(), tg::optim::SGDOptions(0.1)),
        sched(opt, 1, 0.5) {}

  bool run(int64_t& step, const ex::StepOptions& options, ex::CsvLog& csv) {
    ex::StepLoop loop{options, opt, sched, model->parameters(), log};
    loop.csv = &csv;
    loop.loss = [&] {
      const tg::Tensor d = model->forward(tg::tensor({{1.0f, 2.0f}, {-1.0f, 0.5f}})) - 1.0f;
      const tg::Tensor l = tg::mean(d * d);
      losses.push_back(l.item());
      return l;
    };
    loop.end_window = [&](double train_loss) {
      evaluated.push_back(step);
      train_losses.push_back(train_loss);
      return ex::StepLoop::WindowEnd{0.5, "summary"};
    };
    loop.save = [&](int64_t at) {
      saved.push_back(at);
      last = ex::snapshot(*model, {{"optimizer", opt}, {"scheduler", sched}, {"log", log}}, at);
    };
    return loop.run(step);
  }
};

std::string row(int64_t step, double loss, double lr, const std::string& accuracy) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%lld,%.6g,%.6g,%s\n", static_cast<long long>(step), loss, lr, accuracy.c_str());
  return buf;
}

}  // namespace

TEST(StepLoop, WindowsEndAtMultiplesOfEvalEveryWithARowEveryLogEvery) {
  const std::string path = temp_dir("step_loop") + "/run.csv";
  tg::manual_seed(3);
  LoopRun r;
  int64_t step = 0;
  {
    ex::CsvLog csv(path);
    ex::StepOptions o;
    o.steps = 7;
    o.eval_every = 3;
    o.log_every = 2;
    EXPECT_TRUE(r.run(step, o, csv));
  }
  EXPECT_EQ(step, 7);
  EXPECT_EQ(r.evaluated, (std::vector<int64_t>{3, 6, 7}));
  EXPECT_EQ(r.saved, (std::vector<int64_t>{3, 6, 7}));
  ASSERT_EQ(r.losses.size(), 7u);
  const auto& l = r.losses;
  EXPECT_LT(l[6], l[0]);  // it trains
  EXPECT_DOUBLE_EQ(r.train_losses[0], (l[0] + l[1] + l[2]) / 3);
  EXPECT_DOUBLE_EQ(r.train_losses[1], (l[3] + l[4] + l[5]) / 3);
  EXPECT_DOUBLE_EQ(r.train_losses[2], l[6]);
  auto lr = [](int64_t s) { return 0.1 * std::pow(0.5, static_cast<double>(s - 1)); };  // step s's lr
  // Rows every 2 steps, none at a window's end (step 6) but one there with the accuracy.
  EXPECT_EQ(read(path), "step,loss,lr,accuracy\n" + row(2, (l[0] + l[1]) / 2, lr(2), "") +
                            row(3, l[2], lr(3), "0.5") + row(4, l[3], lr(4), "") + row(6, (l[4] + l[5]) / 2, lr(6), "0.5") +
                            row(7, l[6], lr(7), "0.5"));
}

TEST(StepLoop, StopAfterThenResumeFromTheSnapshotEqualsOneRun) {
  const std::string dir = temp_dir("step_loop_resume");
  ex::StepOptions o;
  o.steps = 6;
  o.eval_every = 4;
  o.log_every = 1;
  tg::manual_seed(5);
  LoopRun whole;
  int64_t step = 0;
  {
    ex::CsvLog csv(dir + "/whole.csv");
    EXPECT_TRUE(whole.run(step, o, csv));
  }

  tg::manual_seed(5);
  LoopRun first;
  step = 0;
  ex::StepOptions stop = o;
  stop.stop_after = 3;
  {
    ex::CsvLog csv(dir + "/parts.csv");
    EXPECT_FALSE(first.run(step, stop, csv));
  }
  EXPECT_EQ(step, 3);
  EXPECT_EQ(first.saved, (std::vector<int64_t>{3}));
  EXPECT_TRUE(first.evaluated.empty());

  tg::manual_seed(99);  // another model, set from the snapshot
  LoopRun second;
  first.last.restore(*second.model, {{"optimizer", second.opt}, {"scheduler", second.sched}, {"log", second.log}});
  step = first.last.step;
  {
    ex::CsvLog csv(dir + "/parts.csv", step);
    EXPECT_TRUE(second.run(step, o, csv));
  }
  EXPECT_EQ(second.evaluated, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(read(dir + "/parts.csv"), read(dir + "/whole.csv"));
  EXPECT_EQ(second.model->weight.to_vector(), whole.model->weight.to_vector());
  EXPECT_DOUBLE_EQ(second.train_losses[0], whole.train_losses[0]);  // the sums crossed the stop
}
