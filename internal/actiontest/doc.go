// Package actiontest holds the tests of the qualbox GitHub Action
// (action.yml, action/run.sh; README.md "Use it in your CI"): they run the
// action's script with a GitHub runner's environment simulated, on lane A's
// Engine (docs/lanes.md#lane-a) when it answers. It has no code of its own.
package actiontest
