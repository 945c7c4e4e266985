#pragma once
// Everything in one include.
#include "tapegrad/autograd.h"
#include "tapegrad/device.h"
#include "tapegrad/error.h"
#include "tapegrad/ops.h"
#include "tapegrad/random.h"
#include "tapegrad/tensor.h"
#include "tapegrad/nn.h"
#include "tapegrad/state_dict.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/npz.h"
#include "tapegrad/optim.h"
#include "tapegrad/data.h"
