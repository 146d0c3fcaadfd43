# GPU memory: the CUDA driver loader (util layer) and the per-device GPUDirect
# decision (topo layer). Folded into the layer libraries, so that the plugin,
# the tools and the tests get them the way they get the rest of each layer.
libsrd_util_la_SOURCES += src/util/cuda.c
libsrd_util_la_LIBADD += -ldl
libsrd_topo_la_SOURCES += src/topo/gdr.c
