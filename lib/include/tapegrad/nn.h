#pragma once
// All of tg::nn.
#include "tapegrad/nn/activation.h"
#include "tapegrad/nn/attention.h"
#include "tapegrad/nn/generation.h"
#include "tapegrad/nn/init.h"
#include "tapegrad/nn/kv_cache.h"
#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/rnn.h"
#include "tapegrad/nn/unary.h"
