# Warnings as errors on project code only (DESIGN.md §3).
# GCC 12 at -O3 reports -Wrestrict inside libstdc++'s std::string operator+ (GCC bug 105329, a
# false positive in the library, not in project code); it stays a warning, not an error.
# TRAINSIM_WERROR=OFF keeps the warnings but not as errors: the clang fuzz build
# (scripts/fuzz.sh) compiles code that only g++ checks, and a clang-only warning must not stop it.
option(TRAINSIM_WERROR "Treat warnings in project code as errors" ON)
function(trainsim_warnings target)
  if(TRAINSIM_WERROR)
    set(_werror -Werror)
  else()
    set(_werror)
  endif()
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra ${_werror} -Wno-error=deprecated-declarations>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-error=restrict>)
endfunction()

# One library per folder: trainsim_library(NAME SOURCES... DEPS ...)
function(trainsim_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  trainsim_warnings(${name})
endfunction()
