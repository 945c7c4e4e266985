#pragma once
// Every error tapegrad throws derives from tg::Error. Messages say what was expected,
// what came, and where (the op name or module path).
#include <stdexcept>
#include <string>

namespace tg {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Shapes that do not fit an op or module: the message names the op and both shapes.
class ShapeError : public Error { using Error::Error; };
/// An index out of range: gather indices, class targets, axes.
class IndexError : public Error { using Error::Error; };
/// A tensor of the wrong dtype: an int64 or bool tensor given to an op that computes on
/// floats, or asked to require a gradient.
class TypeError : public Error { using Error::Error; };
/// A bad option or argument value (negative lr, p outside [0, 1), ...).
class ValueError : public Error { using Error::Error; };
/// Misuse of the autograd engine (backward twice through a freed graph, ...).
class AutogradError : public Error { using Error::Error; };
/// A checkpoint that cannot be read or does not fit the model.
class CheckpointError : public Error { using Error::Error; };
/// A file that cannot be opened, read or written.
class IOError : public Error { using Error::Error; };
/// Memory ran out: a tensor buffer (or a file's contents) could not be allocated. The message
/// says how many bytes were asked for and how many tapegrad already holds.
class MemoryError : public Error { using Error::Error; };
/// Anomaly detection (tg::detect_anomaly) found NaN or Inf: the message names the first op
/// whose forward or backward produced it, the module whose forward recorded it, and the shapes.
class AnomalyError : public Error { using Error::Error; };

}  // namespace tg
