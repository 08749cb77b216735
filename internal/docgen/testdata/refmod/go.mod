module example.com/refmod

go 1.26
