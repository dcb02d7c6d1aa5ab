# A compiler cache for repeated builds of the same sources (CI builds a
# clean clone three times per run: main, ASan, TSan). HORA_CCACHE=auto uses
# ccache when it is on PATH; the cache lives beside the project's Python
# environment (~/.cache/hora/ccache, or HORA_CCACHE_DIR), which outlives a
# clone. Paths inside the source tree are hashed relative to it, so another
# clone of the same commit hits the same entries. The tests' precompiled
# headers need ccache's pch sloppiness (the .gch file is hashed instead).
# Depend mode takes the headers from the compiler's own dependency file, so
# a miss costs no extra preprocessing. Measured: a second clean clone's TSan
# build took 13 s against 490 s for the first (235 of 235 direct hits).
# HORA_CCACHE in the environment (for builds that pip starts, which take no
# -D options) wins over the build tree's cached value at every configure.
set(HORA_CCACHE "auto" CACHE STRING "Compile through ccache: auto, on or off")
if(NOT "$ENV{HORA_CCACHE}" STREQUAL "")
  set(HORA_CCACHE "$ENV{HORA_CCACHE}" CACHE STRING "Compile through ccache: auto, on or off" FORCE)
endif()
set_property(CACHE HORA_CCACHE PROPERTY STRINGS auto on off)
if(NOT HORA_CCACHE MATCHES "^(auto|on|off)$")
  message(FATAL_ERROR "HORA_CCACHE is '${HORA_CCACHE}': it takes auto, on or off")
endif()

if(NOT HORA_CCACHE STREQUAL "off")
  find_program(HORA_CCACHE_PROGRAM ccache)
  if(NOT HORA_CCACHE_PROGRAM AND HORA_CCACHE STREQUAL "on")
    message(FATAL_ERROR "HORA_CCACHE=on but ccache is not on PATH")
  endif()
  if(HORA_CCACHE_PROGRAM)
    # Where scripts/python-env keeps the environments, as it finds that.
    if(NOT "$ENV{HORA_CCACHE_DIR}" STREQUAL "")
      set(_ccache_dir "$ENV{HORA_CCACHE_DIR}")
    elseif(NOT "$ENV{HORA_ENV_CACHE}" STREQUAL "")
      set(_ccache_dir "$ENV{HORA_ENV_CACHE}/ccache")
    elseif(NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
      set(_ccache_dir "$ENV{XDG_CACHE_HOME}/hora/ccache")
    else()
      set(_ccache_dir "$ENV{HOME}/.cache/hora/ccache")
    endif()
    # A cache that cannot be written fails every compile: auto goes without.
    execute_process(COMMAND ${CMAKE_COMMAND} -E make_directory "${_ccache_dir}"
                    RESULT_VARIABLE _mkdir_failed ERROR_QUIET)
    execute_process(COMMAND ${CMAKE_COMMAND} -E touch "${_ccache_dir}/.hora-writable"
                    RESULT_VARIABLE _touch_failed ERROR_QUIET)
    if(_mkdir_failed OR _touch_failed)
      if(HORA_CCACHE STREQUAL "on")
        message(FATAL_ERROR "HORA_CCACHE=on but ccache's directory ${_ccache_dir} cannot be "
                            "written (set HORA_CCACHE_DIR to one that can)")
      endif()
      message(STATUS "Not compiling through ccache: ${_ccache_dir} cannot be written")
      unset(HORA_CCACHE_PROGRAM CACHE)
      return()
    endif()
    set(HORA_CCACHE_LAUNCHER
        ${CMAKE_COMMAND} -E env
        "CCACHE_DIR=${_ccache_dir}"
        "CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}"
        CCACHE_NOHASHDIR=1
        CCACHE_DEPEND=1
        "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
        CCACHE_MAXSIZE=2G
        ${HORA_CCACHE_PROGRAM})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${HORA_CCACHE_LAUNCHER})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${HORA_CCACHE_LAUNCHER})
    message(STATUS "Compiling through ccache (${_ccache_dir})")
  endif()
endif()
