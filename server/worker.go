package server

import "github.com/duilie/duilie/workers"

// worker reads the [worker] table: settings only the Worker that duilie worker build makes
// reads. Their keys and rules are package workers' (workers.Settings).
func (c *checker) worker(cfg *Config, v any) {
	t := c.table(c.ns+"worker", v, keys(workers.Settings{})...)
	c.decode(c.ns+"worker", t, &cfg.Worker)
}
