## ch3:rdma: CH3 glue (src/), pipe (ringbuf/), zero-copy (zcopy/)

if BUILD_CH3_RDMA

rdma_dir = src/mpid/ch3/channels/rdma

AM_CPPFLAGS += -I$(top_srcdir)/$(rdma_dir)/include -I$(top_srcdir)/$(rdma_dir)/src \
    -I$(top_srcdir)/$(rdma_dir)/ringbuf -I$(top_srcdir)/$(rdma_dir)/zcopy

noinst_HEADERS += \
    $(rdma_dir)/include/mpidi_ch3_pre.h  \
    $(rdma_dir)/include/mpidi_ch3_impl.h \
    $(rdma_dir)/include/mpidi_ch3_post.h \
    $(rdma_dir)/include/rdma_status.h \
    $(rdma_dir)/src/rdma_xport.h \
    $(rdma_dir)/src/rdma_shm.h \
    $(rdma_dir)/src/rdma_link.h \
    $(rdma_dir)/src/rdma_chan.h \
    $(rdma_dir)/src/rdma_config.h \
    $(rdma_dir)/src/rdma_verbs.h \
    $(rdma_dir)/src/rdma_thread.h \
    $(rdma_dir)/ringbuf/rb_pipe.h \
    $(rdma_dir)/ringbuf/rb_impl.h \
    $(rdma_dir)/ringbuf/rb_frame.h \
    $(rdma_dir)/zcopy/zc.h \
    $(rdma_dir)/zcopy/rcache.h \
    $(rdma_dir)/zcopy/memev.h \
    $(rdma_dir)/zcopy/rhelper.h \
    $(rdma_dir)/zcopy/freq.h

mpi_core_sources += \
    $(rdma_dir)/src/ch3_init.c \
    $(rdma_dir)/src/ch3_send.c \
    $(rdma_dir)/src/ch3_progress.c \
    $(rdma_dir)/src/ch3_fail.c \
    $(rdma_dir)/src/rdma_channel.c \
    $(rdma_dir)/src/rdma_pvars.c \
    $(rdma_dir)/src/rdma_chan.c \
    $(rdma_dir)/src/rdma_chan_wait.c \
    $(rdma_dir)/src/rdma_thread.c \
    $(rdma_dir)/src/rdma_cvars.c \
    $(rdma_dir)/src/rdma_link.c \
    $(rdma_dir)/src/rdma_xport_shm.c \
    $(rdma_dir)/src/rdma_shm_dyn.c \
    $(rdma_dir)/src/rdma_shm_grow.c \
    $(rdma_dir)/src/rdma_shm_probe.c \
    $(rdma_dir)/src/rdma_shm_live.c \
    $(rdma_dir)/src/rdma_xport_verbs.c \
    $(rdma_dir)/src/rdma_verbs_dev.c \
    $(rdma_dir)/src/rdma_verbs_cm.c \
    $(rdma_dir)/src/rdma_verbs_conn.c \
    $(rdma_dir)/src/rdma_verbs_data.c \
    $(rdma_dir)/src/rdma_verbs_reg.c \
    $(rdma_dir)/src/rdma_verbs_eager.c \
    $(rdma_dir)/src/rdma_verbs_grow.c \
    $(rdma_dir)/ringbuf/rb_pipe.c \
    $(rdma_dir)/ringbuf/rb_rx.c \
    $(rdma_dir)/ringbuf/rb_grow.c \
    $(rdma_dir)/ringbuf/rb_config.c \
    $(rdma_dir)/zcopy/zc.c \
    $(rdma_dir)/zcopy/rcache.c \
    $(rdma_dir)/zcopy/rhelper.c \
    $(rdma_dir)/zcopy/freq.c \
    $(rdma_dir)/zcopy/memev.c

endif BUILD_CH3_RDMA

# unconditional: the error catalogue is built from every errnames.txt
errnames_txt_files += src/mpid/ch3/channels/rdma/errnames.txt
