package main

import "io"

func cmdTrain(args []string, stdout, stderr io.Writer) error {
	return usageErr("train: not built yet")
}

func cmdEval(args []string, stdout, stderr io.Writer) error {
	return usageErr("eval: not built yet")
}
