// Package scenario defines qualification scenarios: a small interface, a
// registry, the environment a scenario runs in, and the Record it fills
// with requested and observed facts, checks and owned resources. The
// qualify runner turns a Record into evidence.
//
// Default is the scenario catalogue (docs/qualification.md#scenarios):
// every scenario a manifest may name, each run with the driver against a
// real Engine and ending with a check for leftovers in its namespace. The
// catalogue is identified by CatalogueVersion, bumped when a scenario
// checks more, and CatalogueSHA256, the digest of this package's Go
// sources (this file included), which a gate policy pins
// (docs/qualification.md#gate). A bad manifest parameter is an error
// naming its key.
//
// It is part of the harness, above the driver and the instruments it
// drives them with (the guest probe, the fault proxy, the synthetic
// Engine, the dataset fixture, the archive corpus); it must not import cmd
// (docs/architecture.md; internal/depcheck).
package scenario
