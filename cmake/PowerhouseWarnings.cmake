# Warnings for the project's own targets (not for third-party code).
function(powerhouse_warnings target)
    if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
        target_compile_options(${target} PRIVATE
            $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                -Wcast-align -Wunused -Woverloaded-virtual
                -Wimplicit-fallthrough>)
        if(POWERHOUSE_WERROR)
            target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
        endif()
    endif()
endfunction()
