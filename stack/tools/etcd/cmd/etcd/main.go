// Command etcd runs etcd 3.6 for the local stack; it only calls etcd's own entry point.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
