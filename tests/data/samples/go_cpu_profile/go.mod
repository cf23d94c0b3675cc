module gocpuprofile

go 1.19
