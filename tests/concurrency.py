"""Running a test's body on several Python threads at once (the two-thread promise: each
gets exactly the answers one thread gets)."""
import threading


def run_threads(fn, n):
    """fn(i) for i in range(n), each on its own thread, all released together by a barrier so
    their calls overlap; the results by i. A failure in any thread is raised here (the first)."""
    results, failures, barrier = [None] * n, [], threading.Barrier(n)

    def body(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            failures.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    return results
