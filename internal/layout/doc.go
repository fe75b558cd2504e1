// Package layout holds no code: its tests keep the repository's structure
// true. TestImportDirection checks that every package imports only
// packages of a lower layer (cmd -> pipeline -> sinks and storage ->
// committer -> recovery -> vfs), and that no production package imports a
// test harness; TestFunctionLength checks that no function outside tests
// grows past 100 lines (80 in cmd/).
package layout
