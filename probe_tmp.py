import time, sys
if __name__ == "__main__":
    import dask.config
    from pipeline import processes
    from pipeline.config import ExecutorSettings
    extra = {"distributed.admin.tick.interval": "1s", "distributed.worker.memory.monitor-interval": "1s",
             "distributed.admin.system-monitor.interval": "1s"} if sys.argv[1] == "slow" else {}
    with dask.config.set(extra):
      with processes.using(ExecutorSettings(kind="local-cluster", cluster_workers=2)) as c:
        time.sleep(2)
        before = c.run(lambda: time.process_time()); m0 = time.process_time()
        time.sleep(10)
        after = c.run(lambda: time.process_time()); m1 = time.process_time()
        print(sys.argv[1], "idle 10 s: workers", round(sum(after[k] - before[k] for k in after), 3), "main", round(m1 - m0, 3))
