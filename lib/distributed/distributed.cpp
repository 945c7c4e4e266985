// tg::distributed: the process group, collectives, state broadcast and checks, checkpoints.
// All traffic goes over one communicator of our own (a duplicate of MPI_COMM_WORLD), so it
// never mixes with the program's own MPI messages.
//
// Legend: W = world size, r = rank.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <exception>
#include <string>
#include <vector>

#include "distributed_internal.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/distributed.h"

namespace tg {
namespace distributed {

namespace {

struct Group {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owns_mpi = false;  // we called MPI_Init, so we call MPI_Finalize
  int rank = 0;
  int size = 1;
};
Group& group() {
  static Group g;
  return g;
}

// Messages are split so that no count exceeds what an MPI int can hold.
constexpr int64_t kMaxCount = int64_t(1) << 30;

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw DistributedError(std::string("distributed: ") + what + " failed: " + std::string(text, len));
}

MPI_Comm comm(const char* what) {
  if (group().comm == MPI_COMM_NULL)
    throw DistributedError(std::string("distributed: ") + what +
                           " called before tg::distributed::init()");
  return group().comm;
}

void check_root(int root, const char* what) {
  if (root < 0 || root >= group().size)
    throw ValueError(std::string("distributed: ") + what + ": root " + std::to_string(root) +
                     " is not a rank (world size " + std::to_string(group().size) + ")");
}

/// The ranks whose flag is set, as "1, 3".
std::string ranks_where(bool flag, const char* what) {
  const int w = group().size;
  std::vector<int> flags(w);
  int mine = flag ? 1 : 0;
  check(MPI_Allgather(&mine, 1, MPI_INT, flags.data(), 1, MPI_INT, comm(what)), what);
  std::string out;
  for (int r = 0; r < w; ++r)
    if (flags[r]) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

// ---- the process group ---------------------------------------------------------------------

static void init_impl(int* argc, char*** argv) {
  Group& g = group();
  if (g.comm != MPI_COMM_NULL) return;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) throw DistributedError("distributed: init() after MPI_Finalize");
  if (!initialized) {
    check(MPI_Init(argc, argv), "MPI_Init");
    g.owns_mpi = true;
  }
  check(MPI_Comm_dup(MPI_COMM_WORLD, &g.comm), "MPI_Comm_dup");
  // Errors come back as codes (and then exceptions) instead of aborting the job.
  MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g.comm, &g.rank);
  MPI_Comm_size(g.comm, &g.size);
}

void init(int& argc, char**& argv) { init_impl(&argc, &argv); }
void init() { init_impl(nullptr, nullptr); }

void finalize() {
  Group& g = group();
  if (g.comm == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);  // the program may have finalized MPI itself
  if (!finalized) MPI_Comm_free(&g.comm);
  g.comm = MPI_COMM_NULL;
  g.rank = 0;
  g.size = 1;
  if (g.owns_mpi) {
    if (!finalized) MPI_Finalize();
    g.owns_mpi = false;
  }
}

bool is_initialized() { return group().comm != MPI_COMM_NULL; }

int rank() {
  comm("rank()");
  return group().rank;
}

int world_size() {
  comm("world_size()");
  return group().size;
}

std::string processor_name() {
  comm("processor_name()");
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
  return std::string(name, len);
}

void barrier() { check(MPI_Barrier(comm("barrier")), "MPI_Barrier"); }

// ---- collectives -------------------------------------------------------------------------------

void allreduce(float* data, int64_t count, ReduceOp op) {
  MPI_Comm c = comm("allreduce");
  if (count < 0) throw ValueError("distributed: allreduce: negative count " + std::to_string(count));
  for (int64_t start = 0; start < count; start += kMaxCount) {
    const int n = static_cast<int>(std::min(kMaxCount, count - start));
    check(MPI_Allreduce(MPI_IN_PLACE, data + start, n, MPI_FLOAT, MPI_SUM, c), "MPI_Allreduce");
  }
  if (op == ReduceOp::Average && group().size > 1) {
    const float scale = 1.0f / static_cast<float>(group().size);
    for (int64_t i = 0; i < count; ++i) data[i] *= scale;
  }
}

void allreduce(const Tensor& t, ReduceOp op) {
  if (!t.defined()) throw ValueError("distributed: allreduce of an undefined tensor");
  allreduce(t.data_ptr(), t.numel(), op);
}

double allreduce(double value, ReduceOp op) {
  check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, comm("allreduce")),
        "MPI_Allreduce");
  return op == ReduceOp::Average ? value / group().size : value;
}

void broadcast(float* data, int64_t count, int root) {
  MPI_Comm c = comm("broadcast");
  check_root(root, "broadcast");
  for (int64_t start = 0; start < count; start += kMaxCount) {
    const int n = static_cast<int>(std::min(kMaxCount, count - start));
    check(MPI_Bcast(data + start, n, MPI_FLOAT, root, c), "MPI_Bcast");
  }
}

void broadcast(const Tensor& t, int root) {
  if (!t.defined()) throw ValueError("distributed: broadcast of an undefined tensor");
  broadcast(t.data_ptr(), t.numel(), root);
}

void broadcast(std::string& bytes, int root) {
  MPI_Comm c = comm("broadcast");
  check_root(root, "broadcast");
  long long size = static_cast<long long>(bytes.size());
  check(MPI_Bcast(&size, 1, MPI_LONG_LONG, root, c), "MPI_Bcast");
  if (group().rank != root) bytes.resize(static_cast<size_t>(size));
  for (int64_t start = 0; start < size; start += kMaxCount) {
    const int n = static_cast<int>(std::min<int64_t>(kMaxCount, size - start));
    check(MPI_Bcast(&bytes[start], n, MPI_CHAR, root, c), "MPI_Bcast");
  }
}

// ---- module state ------------------------------------------------------------------------------

namespace {
/// "name [shape]" per line: what must agree across ranks before state can be exchanged.
std::string layout_of(const std::vector<std::pair<std::string, Tensor>>& state) {
  std::string s;
  for (const auto& [name, t] : state) s += name + " " + to_string(t.shape()) + "\n";
  return s;
}

/// The first line where two layouts differ, for the error message.
std::string first_difference(const std::string& mine, const std::string& root, int root_rank) {
  auto lines = [](const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n') out.push_back(s.substr(start, i - start)), start = i + 1;
    return out;
  };
  const auto a = lines(mine), b = lines(root);
  const std::string on_root = "rank " + std::to_string(root_rank) + " has ";
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i >= a.size()) return on_root + "'" + b[i] + "' where this rank's module ends";
    if (i >= b.size()) return "this rank has '" + a[i] + "' where rank " + std::to_string(root_rank) + "'s module ends";
    if (a[i] != b[i]) return "entry " + std::to_string(i) + ": this rank has '" + a[i] + "', " + on_root + "'" + b[i] + "'";
  }
  return "";
}
}  // namespace

namespace detail {
void check_same_layout(const std::vector<std::pair<std::string, Tensor>>& entries, int root,
                       const std::string& what) {
  const std::string mine = layout_of(entries);
  std::string roots = mine;
  broadcast(roots, root);
  const std::string diff = mine == roots ? "" : first_difference(mine, roots, root);
  const std::string bad = ranks_where(!diff.empty(), "check_same_layout");
  if (!bad.empty())
    throw DistributedError("distributed: " + what + " differ from rank " + std::to_string(root) +
                           "'s on rank(s) " + bad + (diff.empty() ? std::string() : "; " + diff));
}
}  // namespace detail

void broadcast_state(nn::Module& module, int root, int64_t bucket_bytes) {
  comm("broadcast_state");
  check_root(root, "broadcast_state");
  const auto state = module.named_state();

  // 1. Every rank must have the same names and shapes as root.
  detail::check_same_layout(state, root, "broadcast_state: the module's parameters and buffers");

  // 2. Pack into buckets, one message each.
  std::vector<int64_t> numels;
  for (const auto& entry : state) numels.push_back(entry.second.numel());
  std::vector<float> buf;
  for (const auto& bucket : plan_buckets(numels, bucket_bytes)) {
    buf.resize(static_cast<size_t>(bucket.numel));
    float* p = buf.data();
    if (group().rank == root)
      for (int64_t i : bucket.params)
        p = std::copy_n(state[i].second.data_ptr(), numels[i], p);
    broadcast(buf.data(), bucket.numel, root);
    if (group().rank != root) {
      p = buf.data();
      for (int64_t i : bucket.params) {
        std::copy_n(p, numels[i], state[i].second.data_ptr());
        p += numels[i];
      }
    }
  }
}

void verify_state(const nn::Module& module) {
  MPI_Comm c = comm("verify_state");
  const auto state = module.named_state();
  const int w = group().size;
  // One CRC per tensor, preceded by the tensor count (so different models also disagree).
  std::vector<uint32_t> mine{static_cast<uint32_t>(state.size())};
  for (const auto& [name, t] : state)
    mine.push_back(crc32(t.data_ptr(), sizeof(float) * static_cast<size_t>(t.numel())));
  int n = static_cast<int>(mine.size()), n_max = n;
  check(MPI_Allreduce(&n, &n_max, 1, MPI_INT, MPI_MAX, c), "MPI_Allreduce");
  mine.resize(static_cast<size_t>(n_max), 0);
  std::vector<uint32_t> all(static_cast<size_t>(n_max) * w);
  check(MPI_Allgather(mine.data(), n_max, MPI_UINT32_T, all.data(), n_max, MPI_UINT32_T, c),
        "MPI_Allgather");
  // Every rank reaches the same verdict from the same gathered table.
  int first = -1;
  std::string ranks;
  for (int r = 1; r < w; ++r) {
    const auto row = all.begin() + static_cast<int64_t>(r) * n_max;
    const auto [a, b] = std::mismatch(all.begin(), all.begin() + n_max, row);
    if (a == all.begin() + n_max) continue;
    const int k = static_cast<int>(a - all.begin());
    if (first < 0 || k < first) first = k;
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    (void)b;
  }
  if (first < 0) return;
  std::string what;
  if (first == 0) what = "the ranks hold different numbers of tensors";
  else if (first - 1 < static_cast<int>(state.size()))
    what = "first difference in '" + state[first - 1].first + "'";
  else what = "first difference in tensor " + std::to_string(first - 1);
  throw DistributedError("distributed: parameters have diverged: rank(s) " + ranks +
                         " differ from rank 0 (" + what + ")");
}

// ---- checkpoints ---------------------------------------------------------------------------------

namespace {
enum ErrorKind : int { kOk = 0, kIO = 1, kCheckpoint = 2, kOther = 3 };

/// Runs `body` on rank 0; then every rank learns its outcome and throws the same error.
template <class Body>
void on_main(const char* what, Body body) {
  comm(what);
  int kind = kOk;
  std::string message;
  std::exception_ptr error;
  if (group().rank == 0) {
    try {
      body();
    } catch (const IOError& e) {
      kind = kIO, message = e.what(), error = std::current_exception();
    } catch (const CheckpointError& e) {
      kind = kCheckpoint, message = e.what(), error = std::current_exception();
    } catch (const std::exception& e) {
      kind = kOther, message = e.what(), error = std::current_exception();
    }
  }
  check(MPI_Bcast(&kind, 1, MPI_INT, 0, group().comm), "MPI_Bcast");
  if (kind == kOk) return;
  broadcast(message, 0);
  if (error) std::rethrow_exception(error);
  message = "rank 0: " + message;
  if (kind == kIO) throw IOError(message);
  if (kind == kCheckpoint) throw CheckpointError(message);
  throw DistributedError(message);
}
}  // namespace

void save_checkpoint(const Checkpoint& ck, const std::string& path) {
  on_main("save_checkpoint", [&] { ck.save(path); });
}

Checkpoint load_checkpoint(const std::string& path) {
  Checkpoint ck;
  std::string payload;
  on_main("load_checkpoint", [&] {
    ck = Checkpoint::load(path);
    payload = ck.serialize();
  });
  broadcast(payload, 0);
  if (group().rank != 0) ck = Checkpoint::deserialize(payload, path + " (from rank 0)");
  return ck;
}

}  // namespace distributed
}  // namespace tg
