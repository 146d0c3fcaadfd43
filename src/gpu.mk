# GPU memory: the CUDA driver loader (util layer), the per-device GPUDirect
# decision (topo layer) and srd-perf's GPU buffers. Folded into the layer
# libraries and the tool, so that the plugin, the tools and the tests get
# them the way they get the rest of each layer (included after them).
libsrd_util_la_SOURCES += src/util/cuda.c
libsrd_util_la_LIBADD += -ldl
libsrd_topo_la_SOURCES += src/topo/gdr.c
srd_perf_SOURCES += src/tools/perf_mem.c src/tools/perf_mem.h
