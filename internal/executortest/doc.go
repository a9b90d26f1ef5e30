// Package executortest is the test kit for SDK executors whose runs are
// detached processes recorded under runs/<id>/ of their executor
// directory (extensions/runner and extensions/shell): one fixture that
// reaches an executor in process, over a pipe or as a child process; the
// two hostings conformance.RunExecutor drives (a crashable in-process
// attachment, and a host.Process the fake clock restarts); the
// child-serving half of a TestMain; the process checks those tests make;
// and the test bodies both executors share.
//
// An executor is described once by an Executor value; the kit never
// imports the executor package it tests.
package executortest
