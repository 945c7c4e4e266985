#pragma once
// What a run leaves beside its checkpoint: a CSV of the training curve and a loss-curve PNG.
//
//   checkpoints/char_rnn_classify.ckpt     the checkpoint
//   checkpoints/char_rnn_classify.csv      step,loss,lr,accuracy (one row per logged step)
//   checkpoints/char_rnn_classify.png      loss (and accuracy) against step, drawn by gnuplot
#include <cstdint>
#include <fstream>
#include <string>

namespace ex {

/// `path` with its extension replaced: ("checkpoints/run.ckpt", ".csv") -> "checkpoints/run.csv".
std::string sibling_path(const std::string& path, const std::string& extension);

/// Creates the directory that will hold `path` (no-op if it exists or there is none);
/// tg::IOError if it cannot.
void make_parent_dirs(const std::string& path);

/// step,loss,lr,accuracy rows. accuracy is a fraction in [0, 1]; NaN writes an empty field.
class CsvLog {
 public:
  /// Starts a new file, or, when resume_step >= 0, keeps the existing rows with
  /// step <= resume_step (a resumed run continues the same curve). tg::IOError on failure.
  explicit CsvLog(const std::string& path, int64_t resume_step = -1);
  void add(int64_t step, double loss, double lr, double accuracy);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

/// Draws the CSV's loss (and, if present, accuracy on a second axis) into `png` with gnuplot.
/// Returns false after printing a note (never throws) if gnuplot is missing or fails.
/// `accuracy_label` names the accuracy curve in the legend.
bool plot_loss_curve(const std::string& csv, const std::string& png, const std::string& title,
                     const std::string& accuracy_label = "training accuracy");

}  // namespace ex
