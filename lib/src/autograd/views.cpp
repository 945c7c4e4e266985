// The autograd of in-place writes through views, as PyTorch does it.
//
// A view shares its base's storage. Writing it in place changes the base's values too, so
// the base's history must record the write: its new node (PyTorch's CopySlices) runs the
// in-place op's own closure on the view's slice of the base's gradient, and passes the rest
// of the gradient through unchanged. The view's history becomes a view of the base's new
// history, and so does every other view of the base, the next time the tape reads it
// (refresh_view in node.h).
//
// Both work on the gradient laid out as the storage is: a buffer with one element per
// storage element, where the base's gradient is written at the base's geometry, and the
// view's read at the view's.
#include <mutex>

#include <xtensor/xbuilder.hpp>

#include "autograd/node.h"
#include "core/shape.h"

namespace tg {
namespace detail {

namespace {

struct Geometry {
  Array::shape_type shape;
  Strides strides;
  int64_t offset;
};

Geometry geometry_of(const TensorImpl& t) { return {t.shape(), t.strides(), t.offset()}; }

Array storage_sized_zeros(size_t n) { return xt::zeros<float>(Array::shape_type{n}); }

Array read_at(const Array& buf, const Geometry& g) {
  Array out = Array::from_shape(g.shape);
  gather(buf.data(), g.shape, g.strides, g.offset, out.data());
  return out;
}

}  // namespace

// y = base seen through the view's geometry      dbase = g added at the view's elements
void regenerate_view_history(const std::shared_ptr<TensorImpl>& view) {
  // Two threads may read one stale view; one of them regenerates it. (Writing a base in place
  // while another thread reads its views is a race on the values anyway.)
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  TensorImpl& v = *view;
  ViewInfo& vi = *v.vi;
  const std::shared_ptr<TensorImpl>& base = vi.base;
  if (vi.base_history == base->history) return;  // the other thread did it
  if (!vi.tracks_base) {
    if (!base->requires_grad || !is_grad_enabled()) return;
    throw AutogradError(
        "a view (shape " + to_string(Shape(v.shape().begin(), v.shape().end())) +
        ") was made in no-grad mode, and its base has since been written in place with grad "
        "mode on, so the view's values have a history it does not know; make the view with "
        "grad mode on, or under tg::NoGradGuard use it only there");
  }
  vi.base_history = base->history;
  if (!base->requires_grad) return;  // nothing to follow
  const Geometry vg = geometry_of(v), bg = geometry_of(*base);
  const size_t n = v.storage->data.size();
  const Tensor input(base);
  auto node = make_node("as_strided", &input, 1, v.shape(), [vg, bg, n](BackwardContext& ctx) {
    Array buf = storage_sized_zeros(n);
    scatter_add(buf.data(), vg.shape, vg.strides, vg.offset, ctx.grad.data());
    ctx.give(0, read_at(buf, bg));
  }, view);
  if (v.grad_fn) v.grad_fn->output.reset();  // retain_grad follows the new history
  v.grad_fn = std::move(node);
  v.requires_grad = true;
}

// base ← base with the view's slice written by op      dbase_old = g outside the slice, and
// the op's gradient of its old values inside it; the op's other inputs get theirs from the
// op's closure, run on g's slice.
void rebase_through_view(const char* name, const Tensor& self, const std::vector<Tensor>& inputs,
                         BackwardFn fn) {
  const std::shared_ptr<TensorImpl>& view = self.impl();
  const std::shared_ptr<TensorImpl> base = view->vi->base;
  if (overlaps(*base))
    throw AutogradError(std::string(name) + ": the view's base (shape " +
                        to_string(Shape(base->shape().begin(), base->shape().end())) +
                        ") repeats elements (an expand), so a write through its view cannot "
                        "be recorded; write a clone()");
  const Geometry vg = geometry_of(*view), bg = geometry_of(*base);
  const size_t n = view->storage->data.size();
  std::vector<Tensor> edges = inputs;
  edges[0] = Tensor(base);  // the base as it was: its old history
  auto node = make_node(
      name, edges.data(), edges.size(), base->shape(),
      [fn = std::move(fn), vg, bg, n](BackwardContext& ctx) {
        Array buf = storage_sized_zeros(n);
        scatter(buf.data(), bg.shape, bg.strides, bg.offset, ctx.grad.data());
        Array slice = read_at(buf, vg);
        std::optional<Array> old_slice;  // the gradient of the slice's values before the write
        BackwardContext on_slice = ctx.on_slice(slice, vg.shape, old_slice);
        fn(on_slice);
        if (!ctx.needs(0)) return;
        if (old_slice) {
          scatter(buf.data(), vg.shape, vg.strides, vg.offset, old_slice->data());
        } else {
          const Array none = xt::zeros<float>(vg.shape);
          scatter(buf.data(), vg.shape, vg.strides, vg.offset, none.data());
        }
        ctx.give(0, read_at(buf, bg));
      },
      base);
  if (base->grad_fn) base->grad_fn->output.reset();
  base->grad_fn = std::move(node);
  base->requires_grad = true;
  ++base->history;
  view->vi->tracks_base = true;
  regenerate_view_history(view);
}

}  // namespace detail
}  // namespace tg
