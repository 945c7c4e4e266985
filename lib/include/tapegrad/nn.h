#pragma once
// All of tg::nn.
#include "tapegrad/nn/attention.h"
#include "tapegrad/nn/cloneable.h"
#include "tapegrad/nn/holder.h"
#include "tapegrad/nn/init.h"
#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/ordered_dict.h"
#include "tapegrad/nn/rnn.h"
#include "tapegrad/nn/unary.h"
#include "tapegrad/nn/utils.h"
