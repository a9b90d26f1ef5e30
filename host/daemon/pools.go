package daemon

import (
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// runtimePool is the engine's pool of an executor's declared pool: the
// default (agent turns) is runtime.PoolAgent, settings.concurrency; jobs
// (protocol.PoolJobs) is runtime.PoolJob, settings.job_concurrency. A
// binding's own pool, when it names one, wins over both.
func runtimePool(declared string) string {
	if declared == protocol.PoolJobs {
		return runtime.PoolJob
	}
	return runtime.PoolAgent
}

// applyConcurrency sets the agent and job pools' capacities from
// settings.concurrency and settings.job_concurrency, over settings.pools.
func applyConcurrency(pools map[string]int, s Settings) {
	if s.Concurrency > 0 {
		pools[runtime.PoolAgent] = s.Concurrency
	}
	if s.JobConcurrency > 0 {
		pools[runtime.PoolJob] = s.JobConcurrency
	}
}

// checkConcurrency refuses a negative concurrency (zero is the default).
func checkConcurrency(ds *diagnostics, s Settings) {
	if s.Concurrency < 0 {
		ds.add("$.settings.concurrency", RuleInvalidPool, "concurrency is at least 1 (or absent for the default)")
	}
	if s.JobConcurrency < 0 {
		ds.add("$.settings.job_concurrency", RuleInvalidPool, "job_concurrency is at least 1 (or absent for the default)")
	}
}
