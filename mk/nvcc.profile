# nvcc.profile for the CUDA 11.8 toolchain that `make cuda-toolchain` extracts
# from Debian's .debs into .cache/cuda-11.8 (see mk/cuda.mk). It replaces the
# package's symlink to /etc/nvcc.profile and is relocatable: _HERE_ is the
# folder of the nvcc binary, .cache/cuda-11.8/usr/lib/nvidia-cuda-toolkit/bin.
TOP = $(_HERE_)/../../../..
NVVMIR_LIBRARY_DIR = $(_HERE_)/../libdevice
PATH += $(_HERE_):$(TOP)/usr/bin:
INCLUDES += "-I$(TOP)/usr/include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(TOP)/usr/lib/x86_64-linux-gnu/stubs"
