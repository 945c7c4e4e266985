// Whole-file reads, atomic writes, and the validate-then-apply load of a module's state.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "core/storage.h"
#include "io/checkpoint_internal.h"

namespace tg {
namespace detail {

namespace {
std::atomic<int64_t> g_fail_after{-1};

std::string errno_text() { return std::strerror(errno); }

void fsync_parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename is done; a folder we cannot open cannot be synced
  ::fsync(fd);         // some filesystems refuse (EINVAL); the data itself is already synced
  ::close(fd);
}
}  // namespace

void fail_next_write_after(int64_t bytes) { g_fail_after.store(bytes); }

std::string read_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; it changes nothing for the
  // regular files read below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw IOError("cannot open '" + path + "': " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    throw IOError("'" + path + "' is " + (dir ? "a directory" : "not a regular file") +
                  ", expected a file");
  }
  std::string out;
  try {
    out.resize(static_cast<size_t>(st.st_size));
  } catch (const std::exception&) {  // std::bad_alloc, std::length_error
    ::close(fd);
    throw MemoryError("cannot read '" + path + "': its " + std::to_string(st.st_size) +
                      " bytes do not fit in memory");
  }
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, &out[done], out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = errno_text();
      ::close(fd);
      throw IOError("cannot read '" + path + "': " + why);
    }
    if (n == 0) break;  // the file shrank while we read it: keep what is there
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

namespace {

/// The first 8 hex digits of this boot's id (/proc/sys/kernel/random/boot_id), or "0": a
/// process id names a process only within one boot.
const std::string& boot_tag() {
  static const std::string tag = [] {
    std::string id;
    if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char buf[64] = {0};
      if (std::fgets(buf, sizeof buf, f))
        for (const char* c = buf; *c && id.size() < 8; ++c)
          if (std::isxdigit(static_cast<unsigned char>(*c))) id += *c;
      std::fclose(f);
    }
    return id.empty() ? std::string("0") : id;
  }();
  return tag;
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// Removes PATH.tmp-<this boot>-<pid>-<n> files whose process is gone: what a save killed
/// half-way left behind. Only our own names, only this boot's, never a live process's.
void remove_stale_temporaries(const std::string& path) {
  const std::string prefix = base_name(path) + ".tmp-" + boot_tag() + "-";
  const std::string dir = parent_dir(path);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || !end || *end != '-' || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const char* kind = S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISDIR(st.st_mode) ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                       : "not a regular file";
    throw IOError("cannot save '" + path + "': it exists and is " + kind +
                  "; only a regular file is ever replaced (save to the file a link points at)");
  }
  remove_stale_temporaries(path);
  // A name of this save's own (O_EXCL): two processes saving to one path never share a
  // temporary file, so every reader sees one complete file or the other, and the last rename wins.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp-" + boot_tag() + "-" + std::to_string(::getpid()) + "-" +
                          std::to_string(counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    throw IOError("cannot save '" + path + "': cannot create '" + tmp + "': " + errno_text());
  const int64_t fail_after = g_fail_after.exchange(-1);
  try {
    size_t done = 0;
    while (done < bytes.size()) {
      size_t chunk = std::min<size_t>(bytes.size() - done, size_t(1) << 20);
      if (fail_after >= 0 && done + chunk > static_cast<size_t>(fail_after)) {
        chunk = static_cast<size_t>(fail_after) - done;
        if (chunk == 0)
          throw IOError("cannot save '" + path + "': injected failure after " +
                        std::to_string(done) + " bytes");
      }
      const ssize_t n = ::write(fd, bytes.data() + done, chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw IOError("cannot write '" + tmp + "': " + errno_text());
      done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) throw IOError("cannot sync '" + tmp + "': " + errno_text());
    const int rc = ::close(fd);
    fd = -1;
    if (rc != 0) throw IOError("cannot close '" + tmp + "': " + errno_text());
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      throw IOError("cannot rename '" + tmp + "' to '" + path + "': " + errno_text());
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  fsync_parent_dir(path);
}

LoadPlan plan_load(const nn::Module& module, const NamedTensors& entries,
                   const LoadOptions& options, const std::string& source,
                   const std::string& container) {
  std::map<std::string, const Tensor*> file;
  for (const auto& [name, t] : entries) {
    if (!t.defined()) throw CheckpointError(source + ": entry '" + name + "' is undefined");
    if (!file.emplace(name, &t).second)
      throw CheckpointError(source + ": entry '" + name + "' appears twice");
  }
  LoadPlan plan;
  std::string problems;
  int n_problems = 0;
  std::map<std::string, bool> in_module;
  for (const auto& [name, dst] : module.named_state()) {
    in_module[name] = true;
    auto it = file.find(name);
    if (it == file.end()) {
      plan.report.missing.push_back(name);
      problems += "\n  missing    " + name + ": the model has " + to_string(dst.shape()) +
                  ", " + container + " has no such entry";
      ++n_problems;
    } else if (it->second->shape() != dst.shape()) {
      plan.report.mismatched.push_back({name, dst.shape(), it->second->shape()});
      problems += "\n  shape      " + name + ": the model has " + to_string(dst.shape()) +
                  ", " + container + " has " + to_string(it->second->shape());
      ++n_problems;
    } else if (detail::overlaps(*dst.impl())) {
      problems += "\n  expanded   " + name + ": the model's tensor " + to_string(dst.shape()) +
                  " repeats elements (strides " + to_string(dst.strides()) +
                  "), so it cannot hold the values of " + container;
      ++n_problems;
    } else {
      plan.report.loaded.push_back(name);
      plan.copies.emplace_back(dst, *it->second);
    }
  }
  for (const auto& [name, t] : entries)
    if (!in_module.count(name)) {
      plan.report.unexpected.push_back(name);
      problems += "\n  unexpected " + name + ": " + container + " has " + to_string(t.shape()) +
                  ", the model has no such parameter or buffer";
      ++n_problems;
    }
  if (options.strict() && n_problems > 0)
    throw CheckpointError(source + ": " + std::to_string(n_problems) +
                          (n_problems == 1 ? " entry does" : " entries do") + " not fit the " +
                          module.type_name() + " (nothing was loaded):" + problems);
  return plan;
}

void apply_load(const LoadPlan& plan) noexcept {
  for (const auto& [dst, src] : plan.copies)
    if (src.numel() > 0) {  // an empty tensor's data pointer may be null
      // Through dst's strides: a registered view is written where its elements are.
      detail::write_dense(*dst.impl(), src.data_ptr());
      detail::bump_version(dst);  // a loaded parameter is a new value for any graph that saved it
    }
}

}  // namespace detail

}  // namespace tg
