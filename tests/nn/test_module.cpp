// The Module base: registration, dotted names, modes, the tree and module paths in errors.
#include <gtest/gtest.h>

#include "tapegrad/tapegrad.h"

using namespace tg;

namespace {
struct Block : nn::Module {
  std::shared_ptr<nn::Linear> q_proj, out;
  Block() : Module("Block") {
    q_proj = register_module("q_proj", std::make_shared<nn::Linear>(nn::LinearOptions(4, 4).bias(false)));
    out = register_module("out", std::make_shared<nn::Linear>(4, 2));
    register_buffer("mask", ones({4}));
  }
};
struct Net : nn::Module {
  std::vector<std::shared_ptr<Block>> blocks;
  Net() : Module("Net") {
    for (int i = 0; i < 2; ++i)
      blocks.push_back(register_module(std::to_string(i), std::make_shared<Block>()));
  }
};
}  // namespace

TEST(Module, DottedNamesInRegistrationOrder) {
  auto net = std::make_shared<Net>();
  std::vector<std::string> names;
  for (auto& [n, t] : net->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.q_proj.weight", "0.out.weight", "0.out.bias",
                                             "1.q_proj.weight", "1.out.weight", "1.out.bias"}));
  EXPECT_EQ(net->named_buffers()[1].first, "1.mask");
  EXPECT_EQ(net->blocks[1]->q_proj->path(), "1.q_proj");
  EXPECT_EQ(net->num_parameters(), 2 * (16 + 8 + 2));
  auto mods = net->named_modules();
  ASSERT_EQ(mods.size(), 7u);
  EXPECT_EQ(mods[0].first, "");
  EXPECT_EQ(mods[2].first, "0.q_proj");
  EXPECT_EQ(net->children().size(), 2u);
  EXPECT_TRUE(net->find("1.out.bias").is_same(net->blocks[1]->out->bias));
  EXPECT_THROW(net->find("1.out.nope"), IndexError);
}

TEST(Module, TrainEvalIsRecursive) {
  auto net = std::make_shared<Net>();
  EXPECT_TRUE(net->blocks[0]->out->is_training());
  net->eval();
  EXPECT_FALSE(net->blocks[0]->out->is_training());
  net->train();
  EXPECT_TRUE(net->blocks[1]->q_proj->is_training());
}

TEST(Module, ZeroGrad) {
  auto lin = std::make_shared<nn::Linear>(3, 2);
  sum(lin->forward(ones({1, 3}))).backward();
  ASSERT_TRUE(lin->weight.grad().defined());
  lin->zero_grad();
  for (float g : lin->weight.grad().to_vector()) EXPECT_EQ(g, 0.0f);
  lin->zero_grad(/*set_to_none=*/true);
  EXPECT_FALSE(lin->weight.grad().defined());
}

TEST(Module, ReprShowsTreeShapesAndCounts) {
  auto net = std::make_shared<Net>();
  const std::string r = net->repr();
  EXPECT_NE(r.find("(0): Block("), std::string::npos) << r;
  EXPECT_NE(r.find("(q_proj): Linear(in_features=4, out_features=4, bias=false)"), std::string::npos) << r;
  EXPECT_NE(r.find("weight: [2, 4]"), std::string::npos) << r;
  EXPECT_NE(r.find("Total parameters: 52"), std::string::npos) << r;
}

TEST(Module, ErrorsNameTheModulePath) {
  auto net = std::make_shared<Net>();
  try {
    net->blocks[1]->q_proj->forward(zeros({8, 5, 3}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "1.q_proj (Linear 4→4): input last dim 3, expected 4, input shape [8, 5, 3]");
  }
  EXPECT_THROW(net->register_parameter("0", zeros({1})), ValueError);  // name taken
  EXPECT_THROW(net->register_parameter("a.b", zeros({1})), ValueError);
}

// Regression: a module registered inside itself made parameters() recurse until the stack
// overflowed. Cycles are refused when registering, and nothing is registered.
TEST(Module, RegisteringAModuleInsideItselfIsRefused) {
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 2));
  EXPECT_THROW(seq->push_back(seq), ValueError);
  auto outer = std::make_shared<nn::ModuleList>();
  auto inner = outer->push_back(std::make_shared<nn::ModuleList>());
  try {
    inner->push_back(outer);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("inside itself"), std::string::npos) << e.what();
  }
  EXPECT_EQ(seq->size(), 1u);
  EXPECT_EQ(inner->size(), 0u);
  EXPECT_EQ(seq->parameters().size(), 2u);
  // A module shared by two parents is not a cycle.
  auto shared = std::make_shared<nn::Linear>(2, 2);
  auto a = std::make_shared<nn::Sequential>(shared), b = std::make_shared<nn::Sequential>(shared, a);
  EXPECT_EQ(b->size(), 2u);
}

// Deep nesting builds and traverses without recursion in the path bookkeeping.
TEST(Module, DeeplyNestedSequentials) {
  auto inner = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(1, 1));
  for (int i = 0; i < 10000; ++i) inner = std::make_shared<nn::Sequential>(inner);
  EXPECT_EQ(inner->forward(ones({1, 1})).shape(), (Shape{1, 1}));
}

TEST(Linear, WorkedExampleFromOurNotes) {
  nn::Linear lin(3, 2);
  lin.weight.data().assign({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  lin.bias.data().assign({0.1f, 0.2f});
  const auto y = lin.forward(tensor({1.0f, 2.0f, 3.0f})).to_vector();
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], 1.5f, 1e-6);
  EXPECT_NEAR(y[1], 3.4f, 1e-6);
}
