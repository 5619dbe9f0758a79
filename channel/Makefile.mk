## ch3:rdma, one folder per layer (docs/design.md draws them):
##   src/ch3/          CH3 glue: MPICH types, mpi_errno
##   src/core/         the channel core and links (plain C)
##   ringbuf/ zcopy/   the protocol: pipe, rendezvous
##   src/xport/        the transport contract; shm/ and verbs/ implement it
##   src/thread/ reg/  services below: the channel thread, registration

if BUILD_CH3_RDMA

rdma_dir = src/mpid/ch3/channels/rdma

AM_CPPFLAGS += -I$(top_srcdir)/$(rdma_dir)/include -I$(top_srcdir)/$(rdma_dir)/src/ch3 \
    -I$(top_srcdir)/$(rdma_dir)/src/core -I$(top_srcdir)/$(rdma_dir)/ringbuf \
    -I$(top_srcdir)/$(rdma_dir)/zcopy -I$(top_srcdir)/$(rdma_dir)/src/xport \
    -I$(top_srcdir)/$(rdma_dir)/src/xport/shm -I$(top_srcdir)/$(rdma_dir)/src/xport/verbs \
    -I$(top_srcdir)/$(rdma_dir)/src/thread -I$(top_srcdir)/$(rdma_dir)/reg

noinst_HEADERS += \
    $(rdma_dir)/include/mpidi_ch3_pre.h  \
    $(rdma_dir)/include/mpidi_ch3_impl.h \
    $(rdma_dir)/include/mpidi_ch3_post.h \
    $(rdma_dir)/include/rdma_status.h \
    $(rdma_dir)/src/ch3/rdma_glue.h \
    $(rdma_dir)/src/core/rdma_chan.h \
    $(rdma_dir)/src/core/rdma_config.h \
    $(rdma_dir)/src/core/rdma_link.h \
    $(rdma_dir)/src/core/rdma_bufs.h \
    $(rdma_dir)/ringbuf/rb_pipe.h \
    $(rdma_dir)/ringbuf/rb_impl.h \
    $(rdma_dir)/ringbuf/rb_frame.h \
    $(rdma_dir)/zcopy/zc.h \
    $(rdma_dir)/src/xport/rdma_xport.h \
    $(rdma_dir)/src/xport/shm/rdma_shm.h \
    $(rdma_dir)/src/xport/verbs/rdma_verbs.h \
    $(rdma_dir)/src/xport/verbs/rdma_xport_verbs.h \
    $(rdma_dir)/src/thread/rdma_thread.h \
    $(rdma_dir)/reg/rcache.h \
    $(rdma_dir)/reg/memev.h \
    $(rdma_dir)/reg/rhelper.h \
    $(rdma_dir)/reg/freq.h

mpi_core_sources += \
    $(rdma_dir)/src/ch3/ch3_init.c \
    $(rdma_dir)/src/ch3/ch3_send.c \
    $(rdma_dir)/src/ch3/ch3_progress.c \
    $(rdma_dir)/src/ch3/ch3_fail.c \
    $(rdma_dir)/src/ch3/ch3_owed.c \
    $(rdma_dir)/src/ch3/rdma_rndv.c \
    $(rdma_dir)/src/ch3/rdma_channel.c \
    $(rdma_dir)/src/ch3/rdma_owner.c \
    $(rdma_dir)/src/ch3/rdma_block.c \
    $(rdma_dir)/src/ch3/rdma_win.c \
    $(rdma_dir)/src/ch3/rdma_rma.c \
    $(rdma_dir)/src/ch3/rdma_pvars.c \
    $(rdma_dir)/src/core/rdma_chan.c \
    $(rdma_dir)/src/core/rdma_chan_evict.c \
    $(rdma_dir)/src/core/rdma_chan_wait.c \
    $(rdma_dir)/src/core/rdma_bufs.c \
    $(rdma_dir)/src/thread/rdma_thread.c \
    $(rdma_dir)/src/ch3/rdma_cvars.c \
    $(rdma_dir)/src/core/rdma_link.c \
    $(rdma_dir)/src/xport/shm/rdma_xport_shm.c \
    $(rdma_dir)/src/xport/shm/rdma_shm_dyn.c \
    $(rdma_dir)/src/xport/shm/rdma_shm_grow.c \
    $(rdma_dir)/src/xport/shm/rdma_shm_probe.c \
    $(rdma_dir)/src/xport/shm/rdma_shm_live.c \
    $(rdma_dir)/src/xport/shm/rdma_shm_seg.c \
    $(rdma_dir)/src/xport/verbs/rdma_xport_verbs.c \
    $(rdma_dir)/src/xport/verbs/rdma_verbs_dev.c \
    $(rdma_dir)/src/xport/verbs/rdma_verbs_cm.c \
    $(rdma_dir)/src/xport/verbs/rdma_verbs_conn.c \
    $(rdma_dir)/src/xport/verbs/rdma_verbs_data.c \
    $(rdma_dir)/src/xport/verbs/rdma_verbs_reg.c \
    $(rdma_dir)/src/xport/verbs/rdma_verbs_rma.c \
    $(rdma_dir)/src/xport/verbs/rdma_verbs_eager.c \
    $(rdma_dir)/src/xport/verbs/rdma_verbs_grow.c \
    $(rdma_dir)/src/xport/verbs/rdma_verbs_srq.c \
    $(rdma_dir)/ringbuf/rb_pipe.c \
    $(rdma_dir)/ringbuf/rb_rx.c \
    $(rdma_dir)/ringbuf/rb_grow.c \
    $(rdma_dir)/ringbuf/rb_config.c \
    $(rdma_dir)/zcopy/zc.c \
    $(rdma_dir)/reg/rcache.c \
    $(rdma_dir)/reg/rhelper.c \
    $(rdma_dir)/reg/freq.c \
    $(rdma_dir)/reg/memev.c

endif BUILD_CH3_RDMA

# unconditional: the error catalogue is built from every errnames.txt
errnames_txt_files += src/mpid/ch3/channels/rdma/errnames.txt
