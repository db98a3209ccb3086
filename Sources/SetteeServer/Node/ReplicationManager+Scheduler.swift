import Foundation
import SetteeReplication

/// CouchDB's replication scheduler: at most `[replicator] max_jobs` continuous and `_replicator` jobs run at once,
/// the others wait (`pending`) and take turns every `interval`, `max_churn` at a time.
extension ReplicationManager {
    /// Schedules a continuous `_replicate` or a `_replicator` job: it starts now if fewer than `max_jobs` run,
    /// else it waits for a slot (``schedule()``).
    func start(_ job: Job, onEnd: (@Sendable (Result<ReplicationResult, ReplicationError>) async -> Void)? = nil) {
        job.onEnd = onEnd
        state.withLock { s in
            s.jobs[job.id] = job
            s.pending.append(job.id)
        }
        schedule()
    }

    /// The scheduler's settings (`[replicator]`, live): jobs at once, jobs swapped per interval, the interval.
    var schedulerSettings: (maxJobs: Int, maxChurn: Int, interval: Duration) {
        func int(_ key: String, _ fallback: Int) -> Int {
            node.config.value("replicator", key).flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? fallback
        }
        return (max(1, int("max_jobs", 500)), max(0, int("max_churn", 20)), .milliseconds(max(100, int("interval", 60_000))))
    }

    /// Starts waiting jobs, oldest first, while fewer than `max_jobs` run.
    func schedule() {
        let maxJobs = schedulerSettings.maxJobs
        let ready: [Job] = state.withLock { s in
            guard !s.stopped else { return [] }
            var running = s.jobs.values.count { $0.isRunning }
            var out: [Job] = []
            while running < maxJobs, !s.pending.isEmpty {
                let id = s.pending.removeFirst()
                guard let job = s.jobs[id], !job.isRunning else { continue }
                job.markStarted()
                out.append(job)
                running += 1
            }
            return out
        }
        for job in ready { launch(job) }
    }

    func launch(_ job: Job) {
        let replication = job.replication
        job.task = Task { [weak self] in
            let outcome: Result<ReplicationResult, ReplicationError>
            do {
                outcome = .success(try await replication.run())
            } catch let e as ReplicationError {
                outcome = .failure(e)
            } catch {
                outcome = .failure(ReplicationError.from(error))
            }
            guard let self else { return }
            if job.endRun() {
                // Stopped by the scheduler (its checkpoint recorded): it waits for a slot again, behind the others.
                self.state.withLock { s in if s.jobs[job.id] === job { s.pending.append(job.id) } }
                self.schedule()
                return
            }
            // The outcome is recorded (a `_replicator` document's final state written) while the job is still
            // registered, so a change-feed pass in between can't mistake a finished job for one to resume.
            await job.onEnd?(outcome)
            _ = self.removeJob(job.id, ifSame: job)
            if case .failure(let e) = outcome, e.kind != .cancelled {
                self.state.withLock { s in
                    s.failedJobs.append((job, e, Date()))
                    if s.failedJobs.count > 50 { s.failedJobs.removeFirst() }
                }
            }
            self.schedule()
        }
    }

    /// CouchDB's rotation: every `interval`, when jobs wait and every slot is taken, up to `max_churn` of the
    /// continuous jobs that have run longest stop (recording their checkpoints) and wait again behind the others;
    /// the waiting ones take their slots.
    /// (The settings are read every 250 ms, so a changed `interval` or `max_jobs` applies at once.)
    func runScheduler() async {
        var lastRotation = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(250))
            if Task.isCancelled { return }
            schedule()
            let settings = schedulerSettings
            guard ContinuousClock.now - lastRotation >= settings.interval else { continue }
            lastRotation = .now
            let victims: [Job] = state.withLock { s in
                let running = s.jobs.values.filter { $0.isRunning }
                guard !s.pending.isEmpty, running.count >= settings.maxJobs else { return [] }
                let candidates = running.filter { $0.spec.continuous }.sorted { $0.startedOn < $1.startedOn }
                return Array(candidates.prefix(min(settings.maxChurn, s.pending.count)))
            }
            for job in victims { _ = job.rotateOut() }
        }
    }

    /// Jobs waiting for a slot (`_scheduler/jobs` and `_scheduler/docs` list them as `pending`).
    var pendingJobs: [(id: String, docID: String?, source: String, target: String, continuous: Bool)] {
        state.withLock { s in s.pending.compactMap { s.jobs[$0] } }.filter { !$0.isRunning }.map {
            ($0.id, $0.docID, $0.replication.source.displayName, $0.replication.target.displayName, $0.spec.continuous)
        }
    }
}
