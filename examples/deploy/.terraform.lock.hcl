# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/hashicorp/archive" {
  version     = "2.8.0"
  constraints = ">= 2.7.0, < 3.0.0"
  hashes = [
    "h1:JqqCtzhw7PjM9dKnjBjzv6qEeVMdcy3ba0KE7TzmXW4=",
  ]
}

provider "registry.terraform.io/hashicorp/google" {
  version     = "7.46.0"
  constraints = ">= 7.0.0, ~> 7.46, < 8.0.0"
  hashes = [
    "h1:OWyFD+VYW9KAWhPDxY/20Q9SS8O0pciiNBUTrcqanxw=",
  ]
}
