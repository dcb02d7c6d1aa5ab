// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The settings table behind config.h: each HORA_* setting's spec and the
// Config field its value lands in. The table is config_rows.cc; the
// parsing, printing and agreement that read it are config.cc.
#pragma once

#include <vector>

#include "common/config.h"

namespace hora::config_internal {

// One row of the table: the public spec plus where its value lands.
struct SettingRow {
  SettingSpec spec;
  double Config::*as_double = nullptr;
  uint64_t Config::*as_bytes = nullptr;  // (also kCount)
  std::string Config::*as_string = nullptr;
  LogLevel Config::*as_log_level = nullptr;
  const char* choices = nullptr;  // strings: the accepted values, "a|b|c" ("" allowed if listed)
  bool secret = false;            // never printed
  bool zero_ok = false;           // numbers: 0 is accepted (it turns the feature off)
  double max = 0;                 // doubles: the largest value accepted (0: no limit)
  double min = 0;                 // doubles: the smallest value above 0 accepted (0: any)
  // Every rank of a job must give it the same value (it decides which
  // algorithm runs, how the engine plans, how ranks connect): ranks compare
  // these when a Session starts (AgreedSettings).
  bool agree = false;
};

// Every setting, in the order AllSettings() lists them.
const std::vector<SettingRow>& Rows();

}  // namespace hora::config_internal
