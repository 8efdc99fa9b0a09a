# The CUDA parts of trainsim (kernels/) are optional: they build when nvcc is found and
# TRAINSIM_WITH_CUDA is ON; otherwise everything else builds and a clear message says why the
# GPU side is off.
set(TRAINSIM_HAVE_CUDA OFF)
if(TRAINSIM_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(TRAINSIM_HAVE_CUDA ON)
      message(STATUS "trainsim: CUDA ${CUDAToolkit_VERSION} found at ${CUDAToolkit_BIN_DIR}: "
                     "building the GPU parts (kernels/)")
    else()
      message(STATUS "trainsim: nvcc found but the CUDA Toolkit libraries are not: "
                     "GPU parts (kernels/) switched off")
    endif()
  else()
    message(STATUS "trainsim: no CUDA compiler (nvcc) found: GPU parts (kernels/) switched off; "
                   "the simulator, CLI and tests build without them")
  endif()
else()
  message(STATUS "trainsim: TRAINSIM_WITH_CUDA=OFF: GPU parts (kernels/) switched off")
endif()
