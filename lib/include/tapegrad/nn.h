#pragma once
// All of tg::nn.
#include "tapegrad/nn/init.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/module.h"
