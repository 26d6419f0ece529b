# Writes OUT (build_info.h) with VERSION and the git commit of SOURCE, only if it changed.
set(commit "unknown")
if(GIT)
    execute_process(COMMAND ${GIT} rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE}
        OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0)
        set(commit "${head}")
        execute_process(COMMAND ${GIT} status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE}
            OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
        if(dirty)
            string(APPEND commit "+changes")
        endif()
    endif()
endif()
set(text "// Written by app/common/build_info.cmake at build time.
#pragma once
#define POWERHOUSE_VERSION \"${VERSION}\"
#define POWERHOUSE_GIT_COMMIT \"${commit}\"
")
if(EXISTS "${OUT}")
    file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
    file(WRITE "${OUT}" "${text}")
endif()
