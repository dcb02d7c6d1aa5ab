// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The whole public C++ API of Hora.
#pragma once

#include "hora/build_info.h"
#include "hora/elastic.h"
#include "hora/session.h"
#include "hora/status.h"
#include "hora/tensor.h"
#include "hora/thread_world.h"
#include "hora/types.h"
