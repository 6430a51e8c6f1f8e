package worker

// The live multi-process tests re-run this test binary as live workers
// (liveCluster, EDL_WORKER_LIVE): runChild runs runLiveChild then.
