package config

import "io/fs"

// NewFilesFS is the file system a bundle's files make.
func NewFilesFS(files map[string]string) (fs.FS, error) { return newFilesFS(files) }
