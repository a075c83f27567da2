// Package termprogress is the terminal display of qualify run's progress
// (--progress): a live view, drawn with github.com/vbauerster/mpb/v8, of
// the scenarios running, how many of the campaign's runs are done, the
// time elapsed and an estimate of the time left, fed by the run's
// qualify.ProgressEvent stream. It also decides between that display and
// the plain lines (Resolve). The qualify package knows nothing of
// terminals: this is one observer of its events, qualify.PlainProgress the
// other (docs/qualification.md#scenarios).
//
// It sits in the command layer, and internal/depcheck keeps it, and mpb,
// out of qualify (docs/architecture.md).
package termprogress
