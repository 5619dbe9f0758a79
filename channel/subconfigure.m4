[#] start of __file__
dnl ch3:rdma -- the RDMA channel (ring-buffer pipes over verbs and shm)

AC_DEFUN([PAC_SUBCFG_PREREQ_]PAC_SUBCFG_AUTO_SUFFIX,[
    AM_CONDITIONAL([BUILD_CH3_RDMA],[test "X$device_name" = "Xch3" -a "X$channel_name" = "Xrdma"])
    AM_COND_IF([BUILD_CH3_RDMA],[
        AC_MSG_NOTICE([RUNNING PREREQ FOR ch3:rdma])
        MPID_MAX_THREAD_LEVEL=MPI_THREAD_MULTIPLE
    ])
])

AC_DEFUN([PAC_SUBCFG_BODY_]PAC_SUBCFG_AUTO_SUFFIX,[
AM_COND_IF([BUILD_CH3_RDMA],[
    AC_MSG_NOTICE([RUNNING CONFIGURE FOR ch3:rdma])
    AC_CHECK_HEADER([infiniband/verbs.h], [],
        [AC_MSG_ERROR([ch3:rdma needs libibverbs headers: apt-get install libibverbs-dev])])
    AC_CHECK_LIB([ibverbs], [ibv_get_device_list], [PAC_LIBS_ADD([-libverbs])],
        [AC_MSG_ERROR([ch3:rdma needs libibverbs: apt-get install libibverbs-dev])])
    AC_CHECK_DECLS([ibv_query_qp_data_in_order], [], [], [[#include <infiniband/verbs.h>]])
    AC_CHECK_FUNCS([memfd_create process_vm_readv])
])
])dnl

[#] end of __file__
