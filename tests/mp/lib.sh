# Shared by the multi-process test scripts (sourced, not run).

# A tag for the job a test starts (run it as `HORA_TEST_TAG=$HORA_TEST_TAG
# horarun ...`: horarun and mpirun pass the environment on to every rank), so
# that the check for processes left running sees this test's job and not one
# of a test running beside it. Not exported: the script's own processes
# (subshells, grep) must not carry it.
HORA_TEST_TAG="hora-test-$$-$RANDOM$RANDOM"

# Prints "PID command" for each process still alive that carries our tag.
tagged_processes() {
  local env_file pid
  for env_file in /proc/[0-9]*/environ; do
    pid=${env_file#/proc/}; pid=${pid%/environ}
    if grep -qzxF "HORA_TEST_TAG=$HORA_TEST_TAG" "$env_file" 2>/dev/null; then
      echo "$pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
    fi
  done
}
