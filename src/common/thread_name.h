// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Names the calling thread (as `top -H`, `ps -L` and debuggers show it).
// Linux keeps at most 15 characters; longer names are cut.
#pragma once

namespace hora {

void NameThisThread(const char* name);

}  // namespace hora
