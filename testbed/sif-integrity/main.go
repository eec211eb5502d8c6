// sif-integrity: Sylabs' own sif library (pkg/integrity, Debian's golang-github-sylabs-sif-dev)
// signing and verifying a SIF, the outside oracle for hvd-container's SIF signatures.
//
//	sif-integrity sign SECRET-KEY.asc FILE.sif   sign every object group (Apptainer's `sign`)
//	sif-integrity verify PUBLIC-KEYS.asc FILE.sif  verify every group (Apptainer's `verify`)
//
// Exit 0: done / verified; 1: refused or failed, the library's error on stderr; 2: usage.
package main

import (
	"fmt"
	"os"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/sylabs/sif/v2/pkg/integrity"
	"github.com/sylabs/sif/v2/pkg/sif"
)

func keys(path string) (openpgp.EntityList, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return openpgp.ReadArmoredKeyRing(f)
}

func sign(keyPath, sifPath string) error {
	el, err := keys(keyPath)
	if err != nil {
		return err
	}
	f, err := sif.LoadContainerFromPath(sifPath)
	if err != nil {
		return err
	}
	defer f.UnloadContainer()
	s, err := integrity.NewSigner(f, integrity.OptSignWithEntity(el[0]))
	if err != nil {
		return err
	}
	return s.Sign()
}

func verify(keyPath, sifPath string) error {
	el, err := keys(keyPath)
	if err != nil {
		return err
	}
	f, err := sif.LoadContainerFromPath(sifPath, sif.OptLoadWithFlag(os.O_RDONLY))
	if err != nil {
		return err
	}
	defer f.UnloadContainer()
	v, err := integrity.NewVerifier(f, integrity.OptVerifyWithKeyRing(el))
	if err != nil {
		return err
	}
	return v.Verify()
}

func main() {
	if len(os.Args) != 4 || (os.Args[1] != "sign" && os.Args[1] != "verify") {
		fmt.Fprintln(os.Stderr, "usage: sif-integrity sign|verify KEYS.asc FILE.sif")
		os.Exit(2)
	}
	run := sign
	if os.Args[1] == "verify" {
		run = verify
	}
	if err := run(os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(os.Args[1] + ": ok")
}
