// Package nomad holds edl's own Nomad job files and ACL policy; the test
// parses them with HCL 2 and checks the settings the README promises.
package nomad
