package server

import "github.com/duilie/duilie/internal/bounded"

// SetListenerBounds makes the fetch listener use b's timeouts and connection cap, so that tests
// need not wait for the defaults.
func SetListenerBounds(cfg *Config, b bounded.Config) { cfg.listenerBounds = b }
