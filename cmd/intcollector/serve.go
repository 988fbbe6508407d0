package main

func serveMain(args []string) int { return 0 }
