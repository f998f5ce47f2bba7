# Shared build settings: warnings, SIMD flags, sanitizers, and the two helpers
# mmx_add_library(NAME SOURCES... DEPS ...) and mmx_add_test(NAME SOURCES... LABELS ... DEPS ...).

# AVX2/FMA/F16C is the CPU floor (the dev and CI machines have it); -march=native is opt-in.
if(MMX_NATIVE)
  set(MMX_ARCH_FLAGS -march=native)
else()
  set(MMX_ARCH_FLAGS -mavx2 -mfma -mf16c)
endif()
set(MMX_WARN_FLAGS -Wall -Wextra -Wno-unused-parameter)

function(mmx_common_flags target)
  target_compile_options(${target} PRIVATE ${MMX_WARN_FLAGS} ${MMX_ARCH_FLAGS})
  if(MMX_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${MMX_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=${MMX_SANITIZE})
  endif()
endfunction()

function(mmx_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  mmx_common_flags(${name})
endfunction()

function(mmx_add_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;LABELS;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${A_DEPS} mmx_testing GTest::gtest GTest::gtest_main)
  mmx_common_flags(${name})
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT})
endfunction()
